package encoding

import "errors"

// Runs. The store writes the open (not yet sealed) readings of a
// series-day in runs: one point key, that of the run's first sample
// (AppendPointKey), whose value is the run's samples encoded as a bucket
// (AppendBucket), or empty for a run of one sample.

// RunSampleMax is the most bytes a sample takes in a run's value, at
// worst, and RunHeaderMax the most its header and parameters take: a run
// of n samples takes at most RunHeaderMax + n*RunSampleMax bytes.
const (
	RunSampleMax = 20
	RunHeaderMax = 64
)

// AppendRun appends to dst the value of the run of samples, which must be
// sorted as a bucket's (Sample.Less, equal samples allowed) and hold 1 to
// 65535 of them: nothing for a run of one sample, else the bucket of all
// of them, the first included. On error it returns dst unchanged.
func AppendRun(dst []byte, run []Sample) ([]byte, error) {
	if len(run) == 1 {
		return dst, nil
	}
	return AppendBucket(dst, run)
}

// DecodeRun appends to dst the samples of the run with value v stored
// under the point key of first (ParsePointTail), after checking that the
// run starts with first. On error it returns dst unchanged, with an error
// from DecodeBucket or one that says the run does not start with first.
func DecodeRun(dst []Sample, first Sample, v []byte) ([]Sample, error) {
	if len(v) == 0 {
		return append(dst, first), nil
	}
	start := len(dst)
	dst, err := DecodeBucket(dst, v)
	if err != nil {
		return dst[:start], err
	}
	if len(dst) == start || !dst[start].Same(first) {
		return dst[:start], errors.New("its first sample is not its key's")
	}
	return dst, nil
}
