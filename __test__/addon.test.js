const native = require('../js/shared/native')

test('the native addon loads and reports the crate version', () => {
  expect(native.version()).toBe(require('../package.json').version)
})
