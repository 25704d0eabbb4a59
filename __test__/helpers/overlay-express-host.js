'use strict'
// What Overlay Express 2.x installs on `server.app`, in its order, for the tests of hosting on
// Overlay Express 2.2 (the package is not on our registry). Read from OverlayExpress.ts
// start() in the upstream ts-stack (packages/overlays/overlay-express): body parsers for
// application/json and application/octet-stream (1 GB each), a CORS middleware that allows
// every origin, method and header and answers every OPTIONS itself, the host's routes
// (/, /listTopicManagers, /listLookupServiceProviders, POST /submit with the x-topics header,
// POST /lookup), then a JSON 404 for every other path. The host's Engine is a real
// @bsv/overlay Engine; only the parts start() adds are reproduced here, in this file's words.

const express = require('express')
const { startServer } = require('./net')

class OverlayExpressHost {
  constructor () {
    this.app = express()
    this.engine = undefined
    this.startTime = undefined
    this.isListening = false
  }

  /** Listens at once (tests need the origin for the base URL); routes come with start(). */
  async listen (port = 0) {
    this.srv = await startServer(this.app, port)
    this.origin = `http://127.0.0.1:${this.srv.port}`
    return this
  }

  /** What OverlayExpress.start() adds to the app, in its order. */
  async start () {
    const engine = this.engine
    this.startTime = new Date()
    const app = this.app
    app.use(express.json({ limit: '1gb', type: 'application/json' }))
    app.use(express.raw({ limit: '1gb', type: 'application/octet-stream' }))
    app.use((req, res, next) => {
      res.header('Access-Control-Allow-Origin', '*')
      res.header('Access-Control-Allow-Headers', '*')
      res.header('Access-Control-Allow-Methods', '*')
      res.header('Access-Control-Expose-Headers', '*')
      res.header('Access-Control-Allow-Private-Network', 'true')
      if (req.method === 'OPTIONS') res.sendStatus(200)
      else next()
    })
    app.get('/', (req, res) => res.type('html').send('<!doctype html><title>overlay</title>'))
    app.get('/listTopicManagers', async (req, res) => res.json(await engine.listTopicManagers()))
    app.get('/listLookupServiceProviders', async (req, res) => res.json(await engine.listLookupServiceProviders()))
    app.post('/submit', async (req, res) => {
      try {
        const topics = JSON.parse(req.headers['x-topics'])
        let answered = false
        const steak = await engine.submit({ beef: Array.from(req.body), topics }, (s) => {
          answered = true
          res.status(200).json(s)
        }, 'current-tx')
        if (!answered) res.status(200).json(steak)
      } catch (e) {
        res.status(400).json({ status: 'error', message: String(e && e.message) })
      }
    })
    app.post('/lookup', async (req, res) => {
      try {
        const { service, query } = req.body
        if (typeof service !== 'string' || query === undefined) return res.status(400).json({ status: 'error', message: 'service and query are required' })
        res.status(200).json(await engine.lookup({ service, query }))
      } catch (e) {
        res.status(400).json({ status: 'error', message: String(e && e.message) })
      }
    })
    app.use((req, res) => res.status(404).json({ status: 'error', code: 'ERR_ROUTE_NOT_FOUND', description: 'Route not found.' }))
    this.isListening = true
  }

  close () {
    return this.srv ? this.srv.close() : Promise.resolve()
  }
}

module.exports = { OverlayExpressHost }
