/**
 * The api's HTTP server with its slow-client limits (issue 17 L6, slowloris): a client gets HTTP_HEADERS_TIMEOUT_MS to
 * send its request headers and HTTP_REQUEST_TIMEOUT_MS for the whole request (body included; a streamed response is
 * not limited), and Node checks those deadlines every second rather than every 30 s (its default), so a socket
 * that trickles headers is answered 408 and closed within about a second of its deadline.
 */
import http from 'node:http';
import type { RequestListener } from 'node:http';
import type { Config } from './config.js';

export function createHttpServer(
  app: RequestListener,
  config: Pick<Config, 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_REQUEST_TIMEOUT_MS'>,
): http.Server {
  return http.createServer(
    {
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: Math.max(config.HTTP_REQUEST_TIMEOUT_MS, config.HTTP_HEADERS_TIMEOUT_MS),
      connectionsCheckingInterval: 1000,
    },
    app,
  );
}
