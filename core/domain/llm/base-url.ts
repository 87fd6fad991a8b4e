/**
 * A workspace's own model `base_url` is checked when its credentials are saved (issue 41), with or without
 * `validate`: the guard its calls go through (core/platform/net/ssrf.ts `checkUrl`: http(s), every address the host
 * resolves to public unless MODEL_ALLOW_PRIVATE_NETWORK), so a private address is refused at once with a message that
 * says why, not on a turn with a generic one; calls check again (a name's address may change). `user:password@` is
 * refused whatever the network setting: the URL is shown in clear in the console's listing.
 */
import { AddressRefusedError, checkUrl, type Lookup } from '../../platform/net/ssrf.js';
import { hasUserinfo } from '../tools/reserved-headers.js';

export class BaseUrlError extends Error {}

/** Throws BaseUrlError saying why `url` may not be a model provider's base URL. */
export async function checkModelBaseUrl(url: string, opts: { allowPrivate: boolean; lookup?: Lookup }): Promise<void> {
  if (hasUserinfo(url))
    throw new BaseUrlError('must not carry user:password@ (it is shown in clear in the console; put the key in api_key)');
  try {
    await checkUrl(url, { allowPrivate: opts.allowPrivate, ...(opts.lookup ? { lookup: opts.lookup } : {}) }, AbortSignal.timeout(5_000));
  } catch (err) {
    if (err instanceof AddressRefusedError)
      throw new BaseUrlError(
        opts.allowPrivate ? err.message : `${err.message} (model calls go to public addresses unless MODEL_ALLOW_PRIVATE_NETWORK is set)`,
      );
    throw err;
  }
}
