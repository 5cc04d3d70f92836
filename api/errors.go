package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// ErrorBody is the error envelope: {"error": {...}, "meta": {...}}.
type ErrorBody struct {
	Error APIError  `json:"error"`
	Meta  ErrorMeta `json:"meta"`
}

// APIError is the error object of the envelope.
type APIError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId,omitempty"`
	Cause     any    `json:"cause,omitempty"`
	Data      any    `json:"data,omitempty"`
}

// FieldCause names the offending field of a validation failure.
type FieldCause struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
	Value  any    `json:"value"`
}

// RetryCause is the cause of an error that says when to try again (the
// Retry-After header carries the same).
type RetryCause struct {
	RetryAfterSeconds int `json:"retryAfterSeconds"`
}

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// ErrorMeta is the meta object of error responses.
type ErrorMeta struct {
	APIVersion           string `json:"apiVersion"`
	APIEnrollmentVersion string `json:"apiEnrollmentVersion"`
}

// ErrorHandler returns echo's HTTPErrorHandler: the only writer of error
// bodies. posture.Error values keep their code; echo's own errors (unknown
// route, wrong method, body too large) are mapped to codes; anything else is
// logged with the request id and answered as a bare 500 UNHANDLED.
func ErrorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		reqID := c.Response().Header().Get(echo.HeaderXRequestID)
		pe := toError(err)
		if pe.Code == posture.CodeUnhandled {
			log.Error("request failed", "requestId", reqID, "method", c.Request().Method,
				"path", c.Request().URL.Path, "err", err)
		}
		body := ErrorBody{
			Error: APIError{Code: pe.Code, Message: pe.Message, RequestID: reqID},
			Meta:  ErrorMeta{APIVersion: "0.0.1", APIEnrollmentVersion: "0.0.1"},
		}
		if body.Error.Message == "" {
			body.Error.Message = posture.DefaultMessage(pe.Code)
		}
		switch {
		case pe.Cause != nil:
			body.Error.Cause = pe.Cause
		case pe.Field != "":
			body.Error.Cause = FieldCause{Field: pe.Field, Reason: pe.Reason, Value: pe.Value}
		case pe.RetryAfter > 0:
			body.Error.Cause = RetryCause{RetryAfterSeconds: retrySeconds(pe.RetryAfter)}
		}
		if pe.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(retrySeconds(pe.RetryAfter)))
		}
		// For HEAD, net/http leaves the content out and keeps its headers.
		_ = c.JSON(StatusOf(pe.Code), body)
	}
}

func toError(err error) *posture.Error {
	var pe *posture.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, posture.ErrNotFound) {
		return &posture.Error{Code: posture.CodeNotFound}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return &posture.Error{Code: posture.CodeNotFound}
		case http.StatusMethodNotAllowed:
			return &posture.Error{Code: posture.CodeMethodNotAllowed}
		case http.StatusRequestEntityTooLarge:
			return &posture.Error{Code: posture.CodeRequestEntityTooLarge}
		case http.StatusUnsupportedMediaType:
			return &posture.Error{Code: posture.CodeUnsupportedMediaType}
		case http.StatusUnauthorized:
			return &posture.Error{Code: posture.CodeUnauthorized}
		case http.StatusBadRequest:
			return &posture.Error{Code: posture.CodeCouldNotParseBody}
		case http.StatusServiceUnavailable:
			return &posture.Error{Code: posture.CodeUnavailable}
		}
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: err.Error()}
	}
	return &posture.Error{Code: posture.CodeUnhandled, Err: err}
}
