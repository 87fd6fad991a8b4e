/**
 * The pages' links `npm start` prints (stack/dev.ts): the chat page with the demo app's key and the studio with the
 * demo account's console key, both in the URL fragment (never sent to a server; the pages move them into
 * sessionStorage). test/e2e/journey.test.ts starts from the same studio link.
 */
export function pageLinks(s: { apiUrl: string; demo: { apiKey: string; consoleKey: string } | null }): { chat: string; studio: string } {
  return {
    chat: `${s.apiUrl}/chat/#key=${s.demo?.apiKey ?? '<your app api key>'}`,
    studio: `${s.apiUrl}/studio/#key=${s.demo?.consoleKey ?? ''}`,
  };
}
