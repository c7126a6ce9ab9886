//go:build badger_nozstd

/*
 * SPDX-FileCopyrightText: © 2017-2025 Istari Digital, Inc.
 * SPDX-License-Identifier: Apache-2.0
 */

// Added for cairn to the v4.9.6 release: see third_party/badger/CAIRN.md.

package y

import "errors"

// ZSTDAvailable says whether this build compresses with ZSTD: not with
// the build tag badger_nozstd, which leaves the ZSTD library out.
const ZSTDAvailable = false

// ErrNoZSTD is what ZSTD compression and decompression return in a build
// without them.
var ErrNoZSTD = errors.New("this build of Badger has no ZSTD compression (build tag badger_nozstd)")

// ZSTDDecompress fails: this build has no ZSTD.
func ZSTDDecompress(dst, src []byte) ([]byte, error) { return nil, ErrNoZSTD }

// ZSTDCompress fails: this build has no ZSTD.
func ZSTDCompress(dst, src []byte, compressionLevel int) ([]byte, error) { return nil, ErrNoZSTD }

// ZSTDCompressBound returns the worst case size needed for a destination buffer.
func ZSTDCompressBound(srcSize int) int {
	lowLimit := 128 << 10 // 128 kB
	var margin int
	if srcSize < lowLimit {
		margin = (lowLimit - srcSize) >> 11
	}
	return srcSize + (srcSize >> 8) + margin
}

// ZSTDDecodedSize says nothing: this build has no ZSTD.
func ZSTDDecodedSize(src []byte) (int, bool) { return 0, false }
