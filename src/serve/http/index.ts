export { createHttpApp, type HttpAppOptions } from './app.ts';
