// The one native error path (src/node/error.rs, js/common/native.js): every error the addon throws or
// rejects with reaches JS with its fields set, and its message is the plain message.
const native = require('../js/common/native')
const { CheckpointStore } = require('../js/client/client')
const h = require('./helpers/live')

function caught (fn) {
  try { fn() } catch (e) { return e }
  throw new Error('expected a throw')
}

test('a synchronous wire error carries code, status and retryable, and no encoding in its message or stack', () => {
  const err = caught(() => native.wireParseOpen(Buffer.from('{"service":1}')))
  expect(err).toMatchObject({ code: 'invalid', status: 400, retryable: false })
  expect(err.message).not.toMatch(/oll-error/)
  expect(err.stack).not.toMatch(/oll-error/)
})

test('a class method error (the client store) carries its code on the client\'s error type', () => {
  const store = CheckpointStore.open(h.tempDir('errs-'))
  try {
    const err = caught(() => store.checkpoint({ provider: 'x', service: 's', queryDigest: 'not hex' }))
    expect(err).toMatchObject({ name: 'LiveLookupError', code: 'invalid', retryable: false })
    expect(err.message).not.toMatch(/^\[|oll-error/)
  } finally {
    store.close()
  }
})

test('an async rejection (opening a store that does not exist) carries its code', async () => {
  const err = await h.openLive(h.tempDir('errs-') + '/none', { create: false }).then(() => null, e => e)
  expect(err).toMatchObject({ code: 'invalid', status: 400, retryable: false })
  expect(err.message).toMatch(/^no store at /)
})

test('a wallet error keeps the SDK-compatible message and is invalid', () => {
  const err = caught(() => native.NativeWalletCore.fromPrivateKey('zz'))
  expect(err.code).toBe('invalid')
  expect(err.message).not.toMatch(/oll-error/)
})

test('napi\'s own argument errors are invalid', () => {
  const err = caught(() => native.wireDigestJson(1, 2))
  expect(err).toMatchObject({ code: 'invalid', status: 400, retryable: false })
})

test('errors that are not native pass through the decoder unchanged', () => {
  const e = new Error('oll-error not json\nrest')
  expect(native.decodeError(e).message).toBe('oll-error not json\nrest')
  expect(native.decodeError(null)).toBe(null)
})
