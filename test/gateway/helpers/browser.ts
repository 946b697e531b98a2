import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/**
 * Headless Chromium for the dashboard's browser tests: Debian's `chromium` (installed by .ci/run), driven by
 * playwright-core, which downloads no browser of its own. CHROMIUM_PATH points elsewhere.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Why the browser tests cannot run here, or null. Where CI is set a missing browser is a failure, not a skip: the
 * suite must not pass without having run them.
 */
export function browserSkipReason(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  const reason = `no Chromium at ${CHROMIUM_PATH} (install Debian's chromium, as .ci/run does, or set CHROMIUM_PATH)`;
  if (process.env.CI) throw new Error(`the dashboard's browser tests cannot run: ${reason}`);
  console.warn(`skipping the dashboard's browser tests: ${reason}`);
  return reason;
}

export async function launchChromium(): Promise<Browser> {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}
