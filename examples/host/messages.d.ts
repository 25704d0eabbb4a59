// Types for examples/host/messages.js (the example's overlay service).
import type { LiveCompanion } from 'overlay-lookup-live'
import type { LookupService } from '@bsv/overlay'

export declare const TOPIC: 'tm_messages'
export declare const SERVICE: 'ls_messages'
export declare const MARKER: string
export declare function decodeMessage (script: string | { toHex (): string }): string | null
/** An @bsv/overlay TopicManager. */
export declare class MessagesTopicManager {
  identifyAdmissibleOutputs (beef: number[], previousCoins: number[]): Promise<{ outputsToAdmit: number[], coinsToRetain: number[] }>
  getDocumentation (): Promise<string>
  getMetaData (): Promise<{ name: string, shortDescription: string }>
}
/** An @bsv/overlay LookupService on a knex table (`init()` creates the table). */
export declare const MessagesLookupService: new (knex: unknown) => LookupService & { init (): Promise<void> }
export declare const messagesCompanion: LiveCompanion
export declare function buildMessageTx (key: unknown, funding: { beef: string, outputIndex: number, satoshis: number }, text: string): Promise<{ txid: string, beef: Buffer }>
