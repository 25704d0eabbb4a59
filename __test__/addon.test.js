const native = require('../js/native')

test('the native addon loads and reports the crate version', () => {
  expect(native.version()).toBe(require('../package.json').version)
})
