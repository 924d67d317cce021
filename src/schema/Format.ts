/**
 * Format constants: the session format version (SPEC §8.1) and the size caps that every
 * writer enforces (B10) and every reader honours (L7).
 *
 * @since 0.1.0
 */

/**
 * The one monotonic session format version stamped into every new session header.
 *
 * @since 0.1.0
 * @category constants
 */
export const SESSION_FORMAT_VERSION = 1 as const

/**
 * Default maximum serialised event size in UTF-8 bytes (B10): 64 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_EVENT_BYTES = 67_108_864

/**
 * Default maximum JSONL line length in bytes (L7): 64 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_LINE_BYTES = 67_108_864
