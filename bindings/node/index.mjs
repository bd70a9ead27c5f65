// The ES module face of the package: the same objects as `require('tooljournal')`.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const tooljournal = require('./index.js');

export const {
  Journal,
  Tool,
  CallContext,
  tool,
  classify,
  rebuild,
  audit,
  readResponse,
  FORMATS,
  TooljournalError,
  JournalLocked,
  Corrupt,
  NewerSchema,
  Refused,
  UsageError,
  Failed,
  StepAborted,
  RetryableError,
} = tooljournal;
export default tooljournal;
