import { Api, checkMasterKey, forgetKey, storedKey, storeKey, type ApiError } from './api.ts';
import { h } from './dom.ts';
import { describeError, errorBanner, type Page, type PageContext } from './page.ts';
import { budgetsPage } from './pages/budgets.ts';
import { keysPage } from './pages/keys.ts';
import { modelsPage } from './pages/models.ts';
import { overviewPage } from './pages/overview.ts';
import { usagePage } from './pages/usage.ts';
import { usersPage } from './pages/users.ts';

/**
 * The dashboard: sign-in with the master key, then one page per hash route (#/overview, #/keys, …). Every page reads
 * the management API afresh when it is shown.
 */
const PAGES: Page[] = [overviewPage, keysPage, usersPage, budgetsPage, usagePage, modelsPage];

const root = document.getElementById('app')!;

function signIn(message: string | null = null, isError = false): void {
  const input = h('input', { type: 'password', name: 'master-key', autocomplete: 'off', spellcheck: 'false', required: true, id: 'master-key' });
  const status = h('p', { class: message ? `banner ${isError ? 'error' : 'info'}` : 'banner hidden', role: isError ? 'alert' : 'status' }, message ?? '');
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'sign-in',
      onSubmit: (event: Event) => {
        event.preventDefault();
        const key = input.value.trim();
        button.disabled = true;
        checkMasterKey(key)
          .then(() => {
            storeKey(key);
            if (!location.hash) location.hash = '#/overview';
            shell();
          })
          .catch((error: ApiError) => {
            status.className = 'banner error';
            status.setAttribute('role', 'alert');
            status.textContent =
              error.status === 401
                ? 'That is not the master key of this gateway. Check GATEWAY_MASTER_KEY (or master_key in its configuration).'
                : error.code === 'master_key_required'
                  ? 'That is a virtual key. The dashboard needs the master key.'
                  : describeError(error);
          })
          .finally(() => (button.disabled = false));
      },
    },
    h('h1', {}, 'Gateway dashboard'),
    h('label', { for: 'master-key' }, 'Master key'),
    input,
    h('p', { class: 'hint' }, 'Kept in this tab only (session storage) and sent with each call to the management API.'),
    button,
    status,
  );
  root.replaceChildren(h('main', { class: 'sign-in-page' }, form));
  input.focus();
}

function endSession(error: ApiError): void {
  forgetKey();
  signIn(`Your session has ended: the gateway no longer accepts the key (${error.message}). Sign in again.`, true);
}

function shell(): void {
  const key = storedKey();
  if (!key) return signIn();
  const api = new Api(key, endSession);
  const errors = h('div', { class: 'errors' });
  const content = h('section', { class: 'content', 'aria-live': 'polite' });
  const links = PAGES.map((page) => h('a', { href: `#/${page.path}` }, page.title));
  const signOut = h(
    'button',
    {
      type: 'button',
      class: 'link',
      onClick: () => {
        forgetKey();
        signIn('Signed out.');
      },
    },
    'Sign out',
  );
  root.replaceChildren(h('nav', { class: 'side' }, h('div', { class: 'brand' }, 'Gateway'), ...links, signOut), h('main', { class: 'main' }, errors, content));

  let generation = 0;
  const context: PageContext = {
    api,
    showError: (error) => errors.replaceChildren(...(error === null ? [] : [errorBanner(error)])),
    refresh: () => render(false),
  };
  async function render(fresh: boolean): Promise<void> {
    const path = location.hash.replace(/^#\/?/, '') || 'overview';
    const page = PAGES.find((candidate) => candidate.path === path) ?? PAGES[0];
    links.forEach((link, i) => link.toggleAttribute('aria-current', PAGES[i] === page));
    document.title = `${page.title} · Gateway dashboard`;
    if (fresh) errors.replaceChildren();
    const mine = ++generation;
    content.setAttribute('aria-busy', 'true');
    try {
      const node = await page.render(context);
      if (mine === generation) content.replaceChildren(node);
    } catch (error) {
      if (mine !== generation || !root.contains(content)) return; // a later page, or back at sign-in
      content.replaceChildren(h('header', { class: 'page-head' }, h('h1', {}, page.title)), errorBanner(error));
    } finally {
      if (mine === generation) content.removeAttribute('aria-busy');
    }
  }
  window.onhashchange = () => void render(true);
  void render(true);
}

shell();
