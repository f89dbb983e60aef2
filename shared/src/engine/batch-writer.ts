/**
 * Writes items as they come, one batch at a time: those that arrive while a batch is being written go
 * together in the next. No added wait when idle (an item alone is written at once); fewer, larger
 * writes under load. Each caller's promise settles when the batch holding its item is written, or
 * with that batch's error. Where the error may be one item's own (`isItemError`), the failed batch's
 * items are written again one by one, so one bad item fails only its own caller.
 */
export class BatchWriter<T> {
  private readonly queued: { item: T; settle: (error?: unknown) => void }[] = [];
  private writing = false;
  private readonly writeBatch: (items: T[]) => Promise<void>;
  private readonly maxBatch: number;
  private readonly isItemError: (error: unknown) => boolean;

  constructor(writeBatch: (items: T[]) => Promise<void>, maxBatch: number, isItemError: (error: unknown) => boolean = () => false) {
    this.writeBatch = writeBatch;
    this.maxBatch = maxBatch;
    this.isItemError = isItemError;
  }

  write(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queued.push({ item, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      if (!this.writing) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writing = true;
    while (this.queued.length > 0) {
      const batch = this.queued.splice(0, this.maxBatch);
      try {
        await this.writeBatch(batch.map((entry) => entry.item));
        for (const entry of batch) entry.settle();
      } catch (error) {
        if (batch.length > 1 && this.isItemError(error)) await this.writeOneByOne(batch);
        else for (const entry of batch) entry.settle(error ?? new Error('batch write failed'));
      }
    }
    this.writing = false;
  }

  private async writeOneByOne(batch: readonly { item: T; settle: (error?: unknown) => void }[]): Promise<void> {
    for (const entry of batch) {
      try {
        await this.writeBatch([entry.item]);
        entry.settle();
      } catch (error) {
        entry.settle(error ?? new Error('write failed'));
      }
    }
  }
}
