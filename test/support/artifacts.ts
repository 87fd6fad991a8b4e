/** Where browser tests keep their screenshots after the run: E2E_SCREENSHOT_DIR, else test-results/screenshots (git-ignored). */
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function screenshotDir(): string {
  return (
    process.env.E2E_SCREENSHOT_DIR ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-results', 'screenshots')
  );
}
