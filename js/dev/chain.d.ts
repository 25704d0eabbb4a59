// Types for js/dev/chain.js: a development-only chain tracker (synthetic blocks).
// @bsv/sdk's own types are not imported here (they do not compile under --strict without
// skipLibCheck): the merkle path and transaction are @bsv/sdk's MerklePath and Transaction.

/** A ChainTracker that knows only the blocks it minted (development only). */
export declare class LocalChainTracker {
  constructor (startHeight?: number, options?: { file?: string })
  /** Opens (or starts) a tracker whose roots are kept in `file` (JSON, replaced atomically). */
  static persisted (file: string): LocalChainTracker
  height: number
  /** Mints a block holding `txid` and returns its merkle path. */
  mint (txid: string): any
  isValidRootForHeight (root: string, height: number): Promise<boolean>
  currentHeight (): Promise<number>
}
/** A proven funding transaction (in a newly minted block) paying one P2PKH output to `address`. */
export declare function mintFunding (chainTracker: LocalChainTracker, address: string, satoshis?: number): { tx: any, outputIndex: number, satoshis: number }
export declare function trackerFile (dataDir: string): string
export declare const SEQUENCE_FINAL: number
