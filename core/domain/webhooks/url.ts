/**
 * A webhook URL is checked when it is saved (issue 45 low, issue 47) with the guard its deliveries go through
 * (core/platform/net/ssrf.ts `checkUrl`: http(s), every address the host resolves to public unless
 * WEBHOOK_ALLOW_PRIVATE_NETWORK), so the owner learns at once, not from a delivery log; deliveries check again (a
 * name's address may change). `user:password@` is refused whatever the network setting: it would be stored and
 * shown in clear (sign with the webhook's secret instead).
 */
import { AddressRefusedError, checkUrl, type Lookup } from '../../platform/net/ssrf.js';
import { hasUserinfo } from '../tools/reserved-headers.js';

export class WebhookUrlError extends Error {}

/** Throws WebhookUrlError saying why `url` may not be a webhook's address. */
export async function checkWebhookUrl(url: string, opts: { allowPrivate: boolean; lookup?: Lookup }): Promise<void> {
  if (hasUserinfo(url))
    throw new WebhookUrlError('must not carry user:password@ (it would be stored and shown in clear; receivers verify the signature)');
  try {
    await checkUrl(url, { allowPrivate: opts.allowPrivate, ...(opts.lookup ? { lookup: opts.lookup } : {}) }, AbortSignal.timeout(5_000));
  } catch (err) {
    if (err instanceof AddressRefusedError)
      throw new WebhookUrlError(
        opts.allowPrivate ? err.message : `${err.message} (deliveries go to public addresses unless WEBHOOK_ALLOW_PRIVATE_NETWORK is set)`,
      );
    throw err;
  }
}
