// The ES module face of the package: the same objects as `require('tooljournal')` (Node reads
// index.js's `module.exports = { ... }` names, so each is a named export here too).
export * from './index.js';
export { default } from './index.js';
