package posture

import (
	"errors"
	"fmt"
	"time"
)

// Error codes, spelled as OpenZiti spells them on the wire.
const (
	CodeUnauthorized             = "UNAUTHORIZED"
	CodeInvalidAuth              = "INVALID_AUTH"
	CodeInvalidAuthMethod        = "INVALID_AUTH_METHOD"
	CodeNotFound                 = "NOT_FOUND"
	CodeCouldNotValidate         = "COULD_NOT_VALIDATE"
	CodeCouldNotParseBody        = "COULD_NOT_PARSE_BODY"
	CodeInvalidFilter            = "INVALID_FILTER"
	CodeInvalidPagination        = "INVALID_PAGINATION"
	CodeInvalidSort              = "INVALID_SORT_IDENTIFIER"
	CodeInvalidPosture           = "INVALID_POSTURE"
	CodeNoEdgeRouters            = "NO_EDGE_ROUTERS_AVAILABLE"
	CodeMFAExists                = "MFA_EXISTS"
	CodeMFAInvalidToken          = "MFA_INVALID_TOKEN"
	CodeMFANotEnrolled           = "MFA_NOT_ENROLLED"
	CodeMFAEnrollmentNotStarted  = "MFA_ENROLLMENT_NOT_STARTED"
	CodeTooManyRequests          = "SERVER_TOO_MANY_REQUESTS"
	CodeInvalidEnrollmentToken   = "INVALID_ENROLLMENT_TOKEN"
	CodeEnrollmentExpired        = "ENROLLMENT_EXPIRED"
	CodeCouldNotProcessCSR       = "COULD_NOT_PROCESS_CSR"
	CodeMissingOrInvalidCSR      = "MISSING_OR_INVALID_CSR"
	CodeInvalidEnrollMethod      = "INVALID_ENROLL_METHOD"
	CodeInvalidContentType       = "INVALID_CONTENT_TYPE"
	CodeCertInUse                = "CERT_IN_USE"
	CodeCAAlreadyVerified        = "CA_ALREADY_VERIFIED"
	CodeReferenced               = "CAN_NOT_DELETE_REFERENCED_ENTITY"
	CodeEnrollmentExists         = "ENROLLMENT_EXISTS"
	CodeInvalidCommonName        = "INVALID_COMMON_NAME"
	CodeCertFailedValidation     = "CERTIFICATE_FAILED_VALIDATION"
	CodeExpectedPEMCertificate   = "EXPECTED_PEM_CERTIFICATE"
	CodeMethodNotAllowed         = "METHOD_NOT_ALLOWED"
	CodeUnhandled                = "UNHANDLED"
	CodeConflict                 = "CONFLICT"
	CodeUnavailable              = "SERVICE_UNAVAILABLE"
	CodeNotImplemented           = "NOT_IMPLEMENTED"
	CodeUnsupportedMediaType     = "UNSUPPORTED_MEDIA_TYPE"
	CodeNotAcceptable            = "NOT_ACCEPTABLE"
	CodeRequestEntityTooLarge    = "REQUEST_ENTITY_TOO_LARGE"
	CodeInvalidSessionTokenInJWT = "INVALID_SESSION_TOKEN"
)

// messages are the default messages of the codes, as OpenZiti words them.
var messages = map[string]string{
	CodeUnauthorized:             "The request could not be completed. The session is not authorized or the credentials are invalid",
	CodeInvalidAuth:              "The authentication request failed",
	CodeInvalidAuthMethod:        "The supplied authentication method is not valid",
	CodeNotFound:                 "The resource requested was not found or is no longer available",
	CodeCouldNotValidate:         "The supplied request contains an invalid document or no valid accept content were available, see cause",
	CodeCouldNotParseBody:        "The body of the request could not be parsed",
	CodeInvalidFilter:            "The filter query supplied is not valid",
	CodeInvalidPagination:        "The pagination properties provided are invalid",
	CodeInvalidSort:              "The sort order supplied is not valid",
	CodeInvalidPosture:           "Posture response data is missing or wrong",
	CodeNoEdgeRouters:            "No edge routers are assigned or online to handle the requested connection",
	CodeMFAExists:                "An MFA record already exists",
	CodeMFAInvalidToken:          "The token provided was invalid",
	CodeMFANotEnrolled:           "The identity is not enrolled in MFA",
	CodeMFAEnrollmentNotStarted:  "MFA enrollment has not been started",
	CodeTooManyRequests:          "Too many requests; try again later",
	CodeInvalidEnrollmentToken:   "The supplied token is not valid",
	CodeEnrollmentExpired:        "The enrollment has expired",
	CodeCouldNotProcessCSR:       "The certificate signing request could not be processed",
	CodeMissingOrInvalidCSR:      "The request is missing a valid certificate signing request",
	CodeInvalidEnrollMethod:      "The enrollment method is not valid",
	CodeInvalidContentType:       "The content type of the request is not valid for this operation",
	CodeCertInUse:                "The certificate is already in use",
	CodeCAAlreadyVerified:        "The CA has already been verified",
	CodeReferenced:               "The entity is referenced by another entity and cannot be deleted",
	CodeEnrollmentExists:         "An enrollment already exists",
	CodeInvalidCommonName:        "The common name of the certificate is not valid",
	CodeCertFailedValidation:     "The certificate failed validation",
	CodeExpectedPEMCertificate:   "Expected a PEM encoded certificate",
	CodeMethodNotAllowed:         "The method is not allowed on this resource",
	CodeUnhandled:                "An unhandled error occurred",
	CodeConflict:                 "The resource was changed concurrently; retry the request",
	CodeUnavailable:              "The service is not ready; try again later",
	CodeNotImplemented:           "The operation is not implemented",
	CodeUnsupportedMediaType:     "The content type of the request is not supported",
	CodeNotAcceptable:            "None of the accepted content types can be produced",
	CodeRequestEntityTooLarge:    "The request body is too large",
	CodeInvalidSessionTokenInJWT: "The session token is not valid",
}

// Error is the one error type that crosses package boundaries. The API's
// error handler turns it into the wire envelope: Code picks the status and
// default message; Field, Reason and Value fill the envelope's cause for
// validation failures; Cause, when set, replaces that cause (for example the
// failing policies of INVALID_POSTURE). RetryAfter, when set, tells the
// caller when to try again (a Retry-After header on a 429 or 503).
type Error struct {
	Code       string
	Message    string
	Field      string
	Reason     string
	Value      any
	Cause      any
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = messages[e.Code]
	}
	s := e.Code + ": " + msg
	if e.Field != "" {
		s += " (" + e.Field + ": " + e.Reason + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// DefaultMessage is the message used for a code when an Error carries none.
func DefaultMessage(code string) string { return messages[code] }

// Errorf builds an Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports a validation failure of one field (400 COULD_NOT_VALIDATE).
func Invalid(field, reason string, value any) *Error {
	return &Error{Code: CodeCouldNotValidate, Field: field, Reason: reason, Value: value}
}

// NotFound reports a missing entity of the given kind.
func NotFound(kind, id string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %q was not found", kind, id)}
}

// ErrNotFound is returned by stores for a missing record; the API turns it
// into NOT_FOUND.
var ErrNotFound = errors.New("not found")

// CodeOf returns the code of err when it is (or wraps) an *Error, else "".
func CodeOf(err error) string {
	if err == nil {
		return "" // without a target for errors.As, which would escape
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// ErrOutOfSpace marks the errors of a write refused for lack of disk space
// (the log's or the projection's): the node answers 503 until space is
// freed, and resumes by itself.
var ErrOutOfSpace = errors.New("out of disk space")
