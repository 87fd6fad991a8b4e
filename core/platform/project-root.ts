/**
 * The project's root directory (the one holding package.json), found from a module's own URL. Files the
 * processes read at run time (web/, prisma/migrations, sandbox sources, package.json) live at the root, while
 * a module runs from the source tree (tsx: `api/app.ts`) or from the compiled build (`dist/api/app.js`), one
 * level deeper — so "../web" relative to the module would be right in one and wrong in the other.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function projectRoot(moduleUrl: string): string {
  const start = path.dirname(fileURLToPath(moduleUrl));
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${start}: cannot find the project root`);
  }
}

/** True when the calling module runs from the compiled build (JavaScript), not from TypeScript sources. */
export const isCompiled = (moduleUrl: string): boolean => !moduleUrl.endsWith('.ts');
