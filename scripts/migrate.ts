/** `npm run migrate`: apply prisma/migrations to DATABASE_URL. */
import { loadConfig } from '../core/platform/config.js';
import { applyMigrations } from '../core/platform/migrate.js';

const config = loadConfig();
if (!config.DATABASE_URL) {
  console.error('DATABASE_URL is not set (npm start migrates its embedded database by itself).');
  process.exit(2);
}
const r = await applyMigrations(config.DATABASE_URL);
console.log(JSON.stringify(r));
