import { Api, checkMasterKey, forgetKey, storedKey, storeKey, type ApiError } from './api.ts';
import { h } from './dom.ts';
import { describeError, errorBanner, type Page, type PageContext } from './page.ts';
import { budgetsPage } from './pages/budgets.ts';
import { keysPage } from './pages/keys.ts';
import { livePage } from './pages/live.ts';
import { modelsPage } from './pages/models.ts';
import { overviewPage } from './pages/overview.ts';
import { pricingPage } from './pages/pricing.ts';
import { providersPage } from './pages/providers.ts';
import { routesPage } from './pages/routes.ts';
import { usagePage } from './pages/usage.ts';
import { usersPage } from './pages/users.ts';

/**
 * The dashboard: sign-in with the master key, then one page per hash route (#/overview, #/keys, …). Every page reads
 * the management API afresh when it is shown.
 */
const PAGES: Page[] = [overviewPage, livePage, keysPage, usersPage, budgetsPage, usagePage, modelsPage, pricingPage, routesPage, providersPage];

const root = document.getElementById('app')!;

/** Ends the page shown (a page that polls stops); set by the shell. */
let leavePage: () => void = () => {};

function signIn(message: string | null = null, isError = false): void {
  leavePage();
  window.onhashchange = null;
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
  const content = h('section', { class: 'content' });
  const main = h('main', { class: 'main', id: 'main-content', tabindex: -1 }, errors, content);
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
  // On a narrow screen the links fold away behind a Menu button (dashboard.css); on a wide one the button is hidden.
  const menu = h('button', { type: 'button', class: 'menu-toggle', 'aria-expanded': 'false', 'aria-controls': 'nav-links' }, 'Menu');
  const nav = h(
    'nav',
    { class: 'side', 'aria-label': 'Dashboard' },
    h('div', { class: 'nav-head' }, h('div', { class: 'brand' }, 'Gateway'), menu),
    h('div', { class: 'nav-links', id: 'nav-links' }, h('ul', {}, ...links.map((link) => h('li', {}, link))), signOut),
  );
  const openMenu = (open: boolean) => {
    nav.classList.toggle('open', open);
    menu.setAttribute('aria-expanded', String(open));
  };
  menu.addEventListener('click', () => openMenu(!nav.classList.contains('open')));
  // A link to the page already shown changes no address, so no hashchange: it reads the page again here.
  for (const link of links) {
    link.addEventListener('click', () => {
      openMenu(false);
      if (link.hash === location.hash) void render(true);
    });
  }
  nav.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && nav.classList.contains('open')) {
      openMenu(false);
      menu.focus();
    }
  });
  // The skip link moves focus past the navigation; it must not change the address (the hash is the page's route).
  const skip = h(
    'a',
    {
      class: 'skip-link',
      href: '#main-content',
      onClick: (event: Event) => {
        event.preventDefault();
        main.focus();
      },
    },
    'Skip to content',
  );
  root.replaceChildren(skip, nav, main);

  let generation = 0;
  let leaving = new AbortController();
  leavePage = () => leaving.abort();
  const context: Omit<PageContext, 'signal'> = {
    api,
    showError: (error) => errors.replaceChildren(...(error === null ? [] : [errorBanner(error)])),
    refresh: () => render(false),
  };
  async function render(fresh: boolean): Promise<void> {
    const path = location.hash.replace(/^#\/?/, '') || 'overview';
    const page = PAGES.find((candidate) => candidate.path === path) ?? PAGES[0];
    links.forEach((link, i) => (PAGES[i] === page ? link.setAttribute('aria-current', 'page') : link.removeAttribute('aria-current')));
    document.title = `${page.title} · Gateway dashboard`;
    if (fresh) {
      errors.replaceChildren();
      openMenu(false);
    }
    leaving.abort();
    leaving = new AbortController();
    const mine = ++generation;
    content.setAttribute('aria-busy', 'true');
    try {
      const node = await page.render({ ...context, signal: leaving.signal });
      if (mine === generation) content.replaceChildren(node);
    } catch (error) {
      if (mine !== generation || !root.contains(content)) return; // a later page, or back at sign-in
      content.replaceChildren(h('header', { class: 'page-head' }, h('h1', {}, page.title)), errorBanner(error));
    } finally {
      if (mine === generation) content.removeAttribute('aria-busy');
    }
    // A new page: keyboard and screen reader users start at its heading, not back at the top of the navigation.
    if (fresh && mine === generation) {
      const title = content.querySelector('h1');
      title?.setAttribute('tabindex', '-1');
      title?.focus();
    }
  }
  window.onhashchange = () => void render(true);
  void render(true);
}

shell();
