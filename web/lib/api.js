// The one API client of the pages: a bearer key (the app key for /v1, the console key for /console/api), JSON in
// and out, Dify's error body `{code, message}` as an ApiError, streams handed back as the raw Response.

export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.code = body.code;
    this.body = body;
  }
}

/**
 * `base`: the path prefix ('' or '/console/api'); `key()`: the current key; `onUnauthorized(error)`: called on every
 * 401 (the key was revoked or mistyped) before the error is thrown. Methods take a path under `base` and
 * `{json, body, headers, signal, method}`; `json` is sent as JSON, `body` (FormData) as is.
 */
export function createApi({ base = '', key, onUnauthorized }) {
  async function request(path, init = {}) {
    const headers = { authorization: `Bearer ${key()}`, ...(init.headers || {}) };
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    const res = await fetch(`${base}${path}`, { method: init.method || (body ? 'POST' : 'GET'), headers, body, signal: init.signal });
    if (!res.ok && !(res.headers.get('content-type') || '').includes('text/event-stream')) {
      const err = new ApiError(res.status, await res.json().catch(() => ({})));
      if (res.status === 401) onUnauthorized?.(err);
      throw err;
    }
    return res;
  }
  const json = async (path, init) => {
    const res = await request(path, init);
    return res.status === 204 ? null : res.json();
  };
  return {
    request,
    json,
    get: (path, init) => json(path, init),
    post: (path, body, init = {}) => json(path, { ...init, method: 'POST', json: body }),
    del: (path, body, init = {}) => json(path, { ...init, method: 'DELETE', json: body }),
  };
}
