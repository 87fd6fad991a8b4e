/**
 * The api's HTTP server with its slow-client limits (issue 17 L6, slowloris): a client gets HTTP_HEADERS_TIMEOUT_MS to
 * send its request headers and HTTP_REQUEST_TIMEOUT_MS for the whole request (body included; a streamed response is
 * not limited), and Node checks those deadlines every second rather than every 30 s (its default), so a socket
 * that trickles headers is answered 408 and closed within about a second of its deadline.
 */
import http from 'node:http';
import type { RequestListener } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from './config.js';
import type { ErrorCode } from '../protocol/error-codes.js';

export function createHttpServer(
  app: RequestListener,
  config: Pick<Config, 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_REQUEST_TIMEOUT_MS'>,
): http.Server {
  const server = http.createServer(
    {
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: Math.max(config.HTTP_REQUEST_TIMEOUT_MS, config.HTTP_HEADERS_TIMEOUT_MS),
      connectionsCheckingInterval: 1000,
    },
    app,
  );
  server.on('clientError', answerClientError);
  return server;
}

/**
 * What Node's parser refuses before the app sees a request — headers (with the URL) over the limit, a timeout,
 * malformed HTTP — answered with Node's status but in the api's `{code, message, status}` shape (Node's own answer
 * has no body; issue 28 fuzzer).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, code, message]: [number, ErrorCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'request_header_fields_too_large', 'The request headers (the URL included) are too large.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'The request took too long to arrive.']
        : [400, 'bad_request', 'The request is not valid HTTP.'];
  const body = JSON.stringify({ code, message, status });
  // A HEAD request's answer has no body (its client would read the body as a broken next response).
  const head = (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ';
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
  );
}
