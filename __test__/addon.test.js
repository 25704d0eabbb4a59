const native = require('../js/common/native')

test('the native addon loads and reports the crate version', () => {
  expect(native.version()).toBe(require('../package.json').version)
})
