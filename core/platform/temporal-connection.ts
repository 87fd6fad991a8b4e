/**
 * How every process reaches the Temporal frontend: address plus the TLS / mTLS / API-key settings of
 * core/platform/config.ts, in the shape both the client's Connection and the worker's NativeConnection take. The PEM
 * files are read once, here, at start-up, so a wrong path stops the process with its name instead of a
 * handshake error later.
 */
import fs from 'node:fs';
import type { TLSConfig } from '@temporalio/client';
import type { Env } from './config.js';

type TemporalEnv = Pick<
  Env,
  | 'TEMPORAL_TLS'
  | 'TEMPORAL_TLS_SERVER_NAME'
  | 'TEMPORAL_TLS_CA_FILE'
  | 'TEMPORAL_TLS_CERT_FILE'
  | 'TEMPORAL_TLS_KEY_FILE'
  | 'TEMPORAL_API_KEY'
>;

/** What Connection.connect/lazy and NativeConnection.connect take besides the address. */
export interface TemporalSecurity {
  tls?: TLSConfig;
  apiKey?: string;
}

function readPem(name: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new Error(`${name}=${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** TLS when asked for, or implied by a TLS file or an API key (a key must never travel in clear text). */
export function temporalSecurity(e: TemporalEnv): TemporalSecurity {
  const implied = Boolean(e.TEMPORAL_API_KEY || e.TEMPORAL_TLS_CA_FILE || e.TEMPORAL_TLS_CERT_FILE || e.TEMPORAL_TLS_SERVER_NAME);
  const useTls = e.TEMPORAL_TLS ?? implied;
  if (!useTls && (e.TEMPORAL_TLS_CA_FILE || e.TEMPORAL_TLS_CERT_FILE))
    throw new Error('TEMPORAL_TLS=false contradicts the TEMPORAL_TLS_* files that are set');
  const out: TemporalSecurity = {};
  if (e.TEMPORAL_API_KEY) out.apiKey = e.TEMPORAL_API_KEY;
  if (!useTls) return out;
  const tls: TLSConfig = {};
  if (e.TEMPORAL_TLS_SERVER_NAME) tls.serverNameOverride = e.TEMPORAL_TLS_SERVER_NAME;
  if (e.TEMPORAL_TLS_CA_FILE) tls.serverRootCACertificate = readPem('TEMPORAL_TLS_CA_FILE', e.TEMPORAL_TLS_CA_FILE);
  if (e.TEMPORAL_TLS_CERT_FILE && e.TEMPORAL_TLS_KEY_FILE)
    tls.clientCertPair = {
      crt: readPem('TEMPORAL_TLS_CERT_FILE', e.TEMPORAL_TLS_CERT_FILE),
      key: readPem('TEMPORAL_TLS_KEY_FILE', e.TEMPORAL_TLS_KEY_FILE),
    };
  out.tls = tls;
  return out;
}

/**
 * A failed connection to Temporal said in the settings' words when it is the TLS handshake (the SDK's own text is a
 * transport error such as `InvalidCertificate(UnknownIssuer)` or `unable to verify the first certificate`): which CA
 * the server's certificate was checked against, or that a client certificate was refused. Other errors unchanged.
 */
export function explainTemporalConnectError(err: unknown, address: string, e: TemporalEnv): Error {
  const msg = err instanceof Error ? err.message : String(err);
  const ca = e.TEMPORAL_TLS_CA_FILE ? `TEMPORAL_TLS_CA_FILE=${e.TEMPORAL_TLS_CA_FILE}` : "the system's CAs (TEMPORAL_TLS_CA_FILE unset)";
  let why: string | null = null;
  if (/UnknownIssuer|unable to verify|self[- ]signed|certificate verify failed|unknown ca|BadSignature/i.test(msg))
    why = `its server certificate is not signed by ${ca}`;
  else if (/NotValidForName|hostname|altnames|IP: .* is not in the cert/i.test(msg))
    why = `its server certificate does not name ${e.TEMPORAL_TLS_SERVER_NAME ? `TEMPORAL_TLS_SERVER_NAME=${e.TEMPORAL_TLS_SERVER_NAME}` : `the host of ${address}`}`;
  else if (/certificate required|bad certificate|handshake failure|CertificateRequired|alert/i.test(msg))
    why = e.TEMPORAL_TLS_CERT_FILE
      ? `it refused this client's certificate TEMPORAL_TLS_CERT_FILE=${e.TEMPORAL_TLS_CERT_FILE}`
      : 'it asks for a client certificate (mTLS): set TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE';
  if (!why) return err instanceof Error ? err : new Error(msg);
  return new Error(`Temporal at ${address} refused the TLS connection: ${why} (${msg})`, { cause: err });
}
