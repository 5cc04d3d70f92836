package api

import (
	"net/http"

	"github.com/seed-0809debe/posture"
)

// statuses maps each error code to the HTTP status OpenZiti answers it with.
// It lives at the HTTP edge: the codes are the domain's, the statuses the
// wire's.
var statuses = map[string]int{
	posture.CodeUnauthorized:             http.StatusUnauthorized,
	posture.CodeInvalidAuth:              http.StatusUnauthorized,
	posture.CodeInvalidAuthMethod:        http.StatusBadRequest,
	posture.CodeNotFound:                 http.StatusNotFound,
	posture.CodeCouldNotValidate:         http.StatusBadRequest,
	posture.CodeCouldNotParseBody:        http.StatusBadRequest,
	posture.CodeInvalidFilter:            http.StatusBadRequest,
	posture.CodeInvalidPagination:        http.StatusBadRequest,
	posture.CodeInvalidSort:              http.StatusBadRequest,
	posture.CodeInvalidPosture:           http.StatusConflict,
	posture.CodeNoEdgeRouters:            http.StatusBadRequest,
	posture.CodeMFAExists:                http.StatusConflict,
	posture.CodeMFAInvalidToken:          http.StatusBadRequest,
	posture.CodeMFANotEnrolled:           http.StatusConflict,
	posture.CodeMFAEnrollmentNotStarted:  http.StatusNotFound,
	posture.CodeTooManyRequests:          http.StatusTooManyRequests,
	posture.CodeInvalidEnrollmentToken:   http.StatusBadRequest,
	posture.CodeEnrollmentExpired:        http.StatusBadRequest,
	posture.CodeCouldNotProcessCSR:       http.StatusBadRequest,
	posture.CodeMissingOrInvalidCSR:      http.StatusBadRequest,
	posture.CodeInvalidEnrollMethod:      http.StatusBadRequest,
	posture.CodeInvalidContentType:       http.StatusBadRequest,
	posture.CodeCertInUse:                http.StatusConflict,
	posture.CodeCAAlreadyVerified:        http.StatusConflict,
	posture.CodeReferenced:               http.StatusConflict,
	posture.CodeEnrollmentExists:         http.StatusConflict,
	posture.CodeInvalidCommonName:        http.StatusBadRequest,
	posture.CodeCertFailedValidation:     http.StatusBadRequest,
	posture.CodeExpectedPEMCertificate:   http.StatusBadRequest,
	posture.CodeMethodNotAllowed:         http.StatusMethodNotAllowed,
	posture.CodeUnhandled:                http.StatusInternalServerError,
	posture.CodeConflict:                 http.StatusConflict,
	posture.CodeUnavailable:              http.StatusServiceUnavailable,
	posture.CodeNotImplemented:           http.StatusNotImplemented,
	posture.CodeUnsupportedMediaType:     http.StatusUnsupportedMediaType,
	posture.CodeNotAcceptable:            http.StatusNotAcceptable,
	posture.CodeRequestEntityTooLarge:    http.StatusRequestEntityTooLarge,
	posture.CodeInvalidSessionTokenInJWT: http.StatusUnauthorized,
}

// StatusOf is the HTTP status of an error code (500 for an unknown code).
func StatusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
