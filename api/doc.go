// Package api holds what the client and management APIs share: the response
// envelope, the one error handler, API-session authentication, paging, the
// write path (append, wait for the projection, answer) and password hashing.
//
// It imports echo and the root package; it declares the small interfaces it
// needs (Log, Barrier, Sessions) and cmd passes in the real implementations.
package api
