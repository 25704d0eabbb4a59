'use strict'
// The one place that loads the generated napi loader (index.js at the package root), and the
// one place that reads native errors: src/node/error.rs puts an error's fields in the first
// line of its message (`oll-error {json}`), because napi gives class methods and promise
// rejections no other channel. Every export is wrapped so that what callers catch is an Error
// with `code`, `status` (BRC-193 §6), `retryable`, and where they apply `retryAfterMs`,
// `limit: {kind}` and `cause`, and the plain message.

const binding = require('../../index.js')

const PREFIX = 'oll-error '
const STATUS = binding.wireErrorStatuses()

/** Moves the encoded fields of a native error onto it; anything else passes unchanged. */
// napi's own failures to convert an argument (`InvalidArg`, `StringExpected`, ...) are the
// caller's bad input.
const NAPI_ARGUMENT = /^(InvalidArg|[A-Za-z]+Expected)$/

function decodeError (err) {
  if (!err || typeof err.message !== 'string') return err
  if (!err.message.startsWith(PREFIX)) {
    if (typeof err.code === 'string' && NAPI_ARGUMENT.test(err.code)) {
      err.code = 'invalid'
      err.status = STATUS.invalid
      err.retryable = false
    }
    return err
  }
  const nl = err.message.indexOf('\n')
  let meta
  try {
    meta = JSON.parse(err.message.slice(PREFIX.length, nl < 0 ? undefined : nl))
  } catch (_) {
    return err
  }
  const encoded = err.message
  const message = nl < 0 ? '' : encoded.slice(nl + 1)
  err.message = message
  if (typeof err.stack === 'string') err.stack = err.stack.replace(encoded, message)
  err.code = meta.code
  err.status = STATUS[meta.code]
  err.retryable = meta.retryable === true
  if (meta.retryAfterMs !== undefined) err.retryAfterMs = meta.retryAfterMs
  if (meta.limit !== undefined) err.limit = { kind: meta.limit }
  if (meta.cause !== undefined) err.cause = new Error(meta.cause)
  return err
}

function rethrow (err) { throw decodeError(err) }

function wrapFunction (fn) {
  return function (...args) {
    let result
    try {
      result = new.target ? Reflect.construct(fn, args, new.target) : fn.apply(this, args)
    } catch (err) {
      rethrow(err)
    }
    return result && typeof result.then === 'function' ? result.catch(rethrow) : result
  }
}

const CLASS = /^class\b/
function isClass (value) {
  return typeof value === 'function' && (CLASS.test(Function.prototype.toString.call(value)) ||
    (value.prototype && Object.getOwnPropertyNames(value.prototype).length > 1))
}

// A napi class's instance methods are replaced in place by wrappers (instances made natively
// get them too).
function wrapMethods (target) {
  for (const name of Object.getOwnPropertyNames(target)) {
    if (name === 'constructor') continue
    const d = Object.getOwnPropertyDescriptor(target, name)
    if (!d || typeof d.value !== 'function' || !d.configurable) continue
    Object.defineProperty(target, name, { ...d, value: wrapFunction(d.value) })
  }
}

function wrapClass (cls) {
  wrapMethods(cls.prototype)
  // napi defines statics non-configurable: the class is exported as a stand-in constructor
  // sharing its prototype (so `instanceof` holds) with the statics wrapped.
  function Native (...args) {
    try {
      return Reflect.construct(cls, args)
    } catch (err) {
      rethrow(err)
    }
  }
  Native.prototype = cls.prototype
  Object.defineProperty(Native, 'name', { value: cls.name })
  for (const name of Object.getOwnPropertyNames(cls)) {
    if (['length', 'name', 'prototype', 'arguments', 'caller'].includes(name)) continue
    const value = cls[name]
    Native[name] = typeof value === 'function' ? wrapFunction(value) : value
  }
  return Native
}

const wrapped = {}
for (const [name, value] of Object.entries(binding)) {
  if (isClass(value)) {
    wrapped[name] = wrapClass(value)
  } else if (typeof value === 'function') {
    wrapped[name] = wrapFunction(value)
  } else {
    wrapped[name] = value
  }
}
wrapped.decodeError = decodeError

module.exports = wrapped
