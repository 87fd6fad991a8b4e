/**
 * Request headers that frame or route an HTTP request (lowercase): a caller who may set headers (an API tool's
 * parameters, the http_request builtin's arguments) may not set these; the connection does.
 */
export const FRAMING_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);
