import pino, { type Logger } from 'pino';
import { activeTraceIds } from './tracing/index.js';

export type { Logger };

/**
 * What is censored in every log line: credential fields, and the credential headers of any logged request or
 * response (`req.headers`, `headers` of an object one level down: a tool call, an upstream response, an error).
 */
export const REDACT_PATHS = [
  'api_key',
  'authorization',
  'secret',
  'password',
  '*.api_key',
  '*.apiKey',
  '*.credentials',
  '*.authorization',
  '*.secret',
  '*.password',
  '*["x-inner-api-key"]',
  'S3_SECRET_ACCESS_KEY',
  '*.S3_SECRET_ACCESS_KEY',
  '*.secretAccessKey',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["proxy-authorization"]',
  'req.headers["x-api-key"]',
  'req.headers["x-inner-api-key"]',
  'req.headers["x-agent-execution-context"]',
  'res.headers["set-cookie"]',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["proxy-authorization"]',
  '*.headers["x-api-key"]',
  '*.headers["x-inner-api-key"]',
  '*.headers["x-agent-execution-context"]',
  '*.headers["set-cookie"]',
];

/** JSON logs; child loggers carry tenant/app/conversation/message/workflow ids, and with tracing on every line
 * carries the active trace_id/span_id (a log line leads to its turn's trace and back). */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    mixin: () => activeTraceIds() ?? {},
    redact: {
      paths: REDACT_PATHS,
      censor: '[redacted]',
    },
  });
}
