import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON logs; child loggers carry tenant/app/conversation/message/workflow ids. */
export function createLogger(name: string, level = 'info'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    redact: {
      paths: ['*.api_key', '*.apiKey', '*.credentials', '*.authorization', 'req.headers.authorization', '*["x-inner-api-key"]'],
      censor: '[redacted]',
    },
  });
}
