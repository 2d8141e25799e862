package grpcshed

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// PushbackKey is the trailer of a rejection that tells a gRPC client's
// retry policy when to try again, in milliseconds (gRFC A6); a negative
// value says not to retry.
const PushbackKey = "grpc-retry-pushback-ms"

// shedHint is the retry delay of a decision that failed (a broken clock or
// cost): the HTTP middleware's Retry-After for it.
const shedHint = time.Second

// Code returns the status code of a rejection of kind k:
// codes.ResourceExhausted for a client over its limit or penalized,
// codes.Unavailable when the server sheds load, codes.OK for Admitted.
func Code(k shed.Kind) codes.Code {
	switch k {
	case shed.OverLimit, shed.Penalized:
		return codes.ResourceExhausted
	case shed.Shedding:
		return codes.Unavailable
	}
	return codes.OK
}

// Rejection returns the status of the rejection d, with a RetryInfo detail
// of d.RetryAfter (none when it is ratelimit.Never), and the trailer
// that carries PushbackKey: d.RetryAfter rounded up to a millisecond, or -1
// for never. The message says the kind, never the rule or the client. An
// Admitted d, which is no rejection, is answered as Shedding.
func Rejection(d shed.Decision) (*status.Status, metadata.MD) {
	var msg string
	switch d.Kind {
	case shed.OverLimit:
		msg = "grpcshed: over limit"
	case shed.Penalized:
		msg = "grpcshed: penalized for abuse"
	default:
		msg = "grpcshed: shedding load"
	}
	st := status.New(Code(d.Kind), msg)
	if d.Kind == shed.Admitted {
		st = status.New(codes.Unavailable, msg) // not a rejection: answered as a broken decision
	}
	if d.RetryAfter <= 0 || d.RetryAfter == ratelimit.Never {
		return st, metadata.Pairs(PushbackKey, "-1")
	}
	ms := int64(d.RetryAfter / time.Millisecond)
	if d.RetryAfter%time.Millisecond != 0 {
		ms++ // never earlier than told
	}
	if s, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}); err == nil {
		st = s // WithDetails fails only for an OK status or a detail that does not marshal
	}
	return st, metadata.Pairs(PushbackKey, strconv.FormatInt(ms, 10))
}

// Outcome maps what a handler returned, and its call's context, to the
// outcome its Token reports: Unavailable, ResourceExhausted and
// DeadlineExceeded (as a status or a context error) are Dropped, overload
// signals for adaptive limits; Canceled is Ignore (the client went away);
// anything else is Success, whose latency is a sample, unless ctx ended,
// which says the same as its error (adaptive.OutcomeOf).
func Outcome(ctx context.Context, err error) shed.Outcome {
	code := status.Code(err)
	if code == codes.Unknown {
		code = status.FromContextError(err).Code() // a bare context error
	}
	switch code {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return shed.Dropped
	case codes.Canceled:
		return shed.Ignore
	}
	switch ctx.Err() {
	case nil:
		return shed.Success
	case context.DeadlineExceeded:
		return shed.Dropped
	}
	return shed.Ignore
}
