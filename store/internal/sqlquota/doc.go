// Package sqlquota holds what the SQL stores (pgstore, mysqlstore) share
// and their users must not see: the table of registered limits with what
// each store's columns keep (Limits), a limit's parameters as the stores'
// decide routines take them (Limit, NewLimit), the decoding of those
// routines' reply into a store.Result (Decode), the instant a refunded
// admission left its token bucket full (PaidOff), and the usage read-out
// built on Decide (Usage). The SQL itself, its dialect and the transport
// stay in each store.
package sqlquota
