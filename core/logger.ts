import pino, { type Logger } from 'pino';
import { activeTraceIds } from './tracing/index.js';

export type { Logger };

/** JSON logs; child loggers carry tenant/app/conversation/message/workflow ids, and with tracing on every line
 * carries the active trace_id/span_id (a log line leads to its turn's trace and back). */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    mixin: () => activeTraceIds() ?? {},
    redact: {
      paths: ['*.api_key', '*.apiKey', '*.credentials', '*.authorization', 'req.headers.authorization', '*["x-inner-api-key"]'],
      censor: '[redacted]',
    },
  });
}
