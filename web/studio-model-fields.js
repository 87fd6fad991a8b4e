// The credential fields the models screen asks for, per model provider: a mirror of the server's credential
// schemas (core/domain/llm/providers/*.ts, `<Name>Credentials`), kept in step by test/e2e/studio-screens.test.ts.
// `secret` fields are password inputs, sent only when typed and never filled back in. An empty list (demo) means
// the provider takes no credentials: the screen shows no form. Left out on purpose: `models` (declared models, a
// list: the API takes them), openai's `organization` / `api`, and Ollama's optional `api_key` (a bearer for a
// proxy in front of Ollama; plain Ollama takes no key).

const apiKey = { key: 'api_key', label: 'API key', secret: true, required: true };
const baseUrl = { key: 'base_url', label: 'Base URL', type: 'url', placeholder: 'https://… (optional)' };

/** @type {Record<string, {key: string, label: string, secret?: boolean, required?: boolean, type?: string, placeholder?: string}[]>} */
export const CREDENTIAL_FIELDS = {
  demo: [],
  openai: [apiKey, baseUrl],
  anthropic: [apiKey, baseUrl],
  google: [apiKey, baseUrl],
  azure: [
    apiKey,
    { key: 'resource_name', label: 'Resource name', placeholder: 'my-resource (or a base URL)' },
    { ...baseUrl, placeholder: 'https://<resource>.openai.azure.com/openai (or a resource name)' },
    { key: 'api_version', label: 'API version', placeholder: 'optional' },
  ],
  bedrock: [
    { key: 'region', label: 'Region', required: true, placeholder: 'us-east-1' },
    { key: 'access_key_id', label: 'Access key ID', secret: true, required: true },
    { key: 'secret_access_key', label: 'Secret access key', secret: true, required: true },
    { key: 'session_token', label: 'Session token', secret: true, placeholder: 'optional' },
    baseUrl,
  ],
  ollama: [{ ...baseUrl, required: true, placeholder: 'http://127.0.0.1:11434/api' }],
  openai_compatible: [
    { ...baseUrl, required: true, placeholder: 'https://…/v1' },
    { ...apiKey, required: false, placeholder: 'optional' },
  ],
};

/** A provider this table does not know (a newer server): the usual API key and base URL. */
export const fieldsOf = (provider) => CREDENTIAL_FIELDS[provider] ?? [apiKey, baseUrl];
