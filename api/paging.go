package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// List paging limits, as OpenZiti applies them.
const (
	DefaultLimit = 10
	MaxLimit     = 500
	MaxOffset    = 100000
)

// ListParams are the paging and filtering parameters of a list request.
type ListParams struct {
	Limit  int64
	Offset int64
	Filter string
	Sort   string
}

// ParseList reads limit, offset, filter and sort. A limit above 500 is
// lowered to 500, and so is -1 ("no limit" to OpenZiti clients), so that no
// answer holds more than 500 items however large the fleet; 0 or below -1
// becomes the default 10; so do integers too large for 64 bits, and an
// offset past 100,000 is 100,000. Non-integer values are 400
// INVALID_PAGINATION.
func ParseList(c echo.Context) (ListParams, error) {
	p := ListParams{Limit: DefaultLimit, Filter: c.QueryParam("filter"), Sort: c.QueryParam("sort")}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			err = nil // n is the nearest int64
		}
		if err != nil {
			return p, &posture.Error{Code: posture.CodeInvalidPagination, Message: "limit must be an integer", Field: "limit", Reason: "not an integer", Value: s}
		}
		p.Limit = normalizeLimit(n)
	}
	if s := c.QueryParam("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			err = nil
		}
		if err != nil || n < 0 {
			return p, &posture.Error{Code: posture.CodeInvalidPagination, Message: "offset must be a non-negative integer", Field: "offset", Reason: "not a non-negative integer", Value: s}
		}
		p.Offset = min(n, MaxOffset)
	}
	return p, nil
}

func normalizeLimit(n int64) int64 {
	switch {
	case n == -1, n > MaxLimit:
		return MaxLimit
	case n <= 0:
		return DefaultLimit
	}
	return n
}

// Paginate answers one page of items with meta.pagination.
func Paginate[T any](c echo.Context, p ListParams, items []T) error {
	return PaginateFields(c, p, items, nil)
}

// PaginateFields is Paginate with meta.filterableFields: the fields the
// list's filter and sort take.
func PaginateFields[T any](c echo.Context, p ListParams, items []T, filterable []string) error {
	start, end := pageBounds(p, len(items))
	return answerPage(c, p, len(items), items[start:end], filterable)
}

// pageBounds are the bounds of p's page in a list of total items.
func pageBounds(p ListParams, total int) (start, end int) {
	start = int(min(p.Offset, int64(total)))
	return start, int(min(int64(start)+normalizeLimit(p.Limit), int64(total)))
}

// PageOf answers one page of a list read page by page (by a store, or
// through costly views): page holds the items offset..offset+PageLimit of
// total (p's bounds), and meta names the fields List would.
func PageOf[T any](c echo.Context, p ListParams, total int, page []T) error {
	return answerPage(c, p, total, page, filterableFields[T](Fields{}))
}

// PageLimit is the number of items a page of p holds at most.
func (p ListParams) PageLimit() int { return int(normalizeLimit(p.Limit)) }

// answerPage answers a page of a list of total items.
func answerPage[T any](c echo.Context, p ListParams, total int, page []T, filterable []string) error {
	if page == nil {
		page = []T{}
	}
	return c.JSON(http.StatusOK, Envelope{
		Data: page,
		Meta: Meta{Pagination: &Pagination{Limit: normalizeLimit(p.Limit), Offset: p.Offset, TotalCount: int64(total)}, FilterableFields: filterable},
	})
}
