package schema

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrUnrepresentable is wrapped by conversion errors for values the
// column's ClickHouse type cannot hold exactly (NaN in a Decimal, a date out
// of Date32's range, a multi-dimensional array, ...). The error text names
// the --text-columns option that makes the column a String instead.
var ErrUnrepresentable = errors.New("value not representable")

// errNull is the error for NULL in a column that is not Nullable.
var errNull = errors.New("NULL in a NOT NULL column")

// maxValueInError bounds how much of a value an error message quotes.
const maxValueInError = 64

// Convert turns PostgreSQL's text output of one value (null true for SQL
// NULL) into the Go value clickhouse-go appends to the column: nil for NULL
// in a Nullable column, the type's zero for NULL under Table.NullAsDefault,
// else the type listed in the package documentation.
// It never changes a value: what ClickHouse cannot hold exactly is an error
// that starts with the quoted column name and quotes the value.
func (c ColumnMap) Convert(text []byte, null bool) (any, error) {
	if null {
		if c.Nullable {
			return nil, nil
		}
		if c.nullZero {
			return c.zero, nil
		}
		return nil, c.nullError()
	}
	if c.conv == nil {
		return nil, fmt.Errorf("column %s: no converter (the ColumnMap was not made by Map)", QuotePG(c.Name))
	}
	v, err := c.conv(text)
	if err != nil {
		return nil, c.wrap(err)
	}
	return v, nil
}

// Zero is the value a deleted row carries in a non-key column: nil when the
// column is Nullable, else the zero of its Go type (time.Unix(0, 0).UTC()
// for Date32 and DateTime64, an empty typed slice for arrays).
func (c ColumnMap) Zero() any {
	if c.Nullable {
		return nil
	}
	return c.zero
}

// nullError explains a NULL that the column cannot store.
func (c ColumnMap) nullError() error {
	if c.key {
		return fmt.Errorf("column %s: %w (it is a key column, and ClickHouse keys can't be Nullable)", QuotePG(c.Name), errNull)
	}
	return fmt.Errorf("column %s: %w", QuotePG(c.Name), errNull)
}

// wrap prefixes a converter's error with the column name and, for values the
// type can't hold, the fix.
func (c ColumnMap) wrap(err error) error {
	if errors.Is(err, ErrUnrepresentable) && c.fix != "" {
		return fmt.Errorf("column %s: %w; fix: %s", QuotePG(c.Name), err, c.fix)
	}
	return fmt.Errorf("column %s: %w", QuotePG(c.Name), err)
}

// quoteValue quotes a value for an error message, cut to maxValueInError
// bytes.
func quoteValue(b []byte) string {
	if len(b) > maxValueInError {
		return strconv.Quote(string(b[:maxValueInError])) + "..."
	}
	return strconv.Quote(string(b))
}

// invalid is the error for text that is not a value of the type.
func invalid(typ string, b []byte) error {
	return fmt.Errorf("invalid %s value %s", typ, quoteValue(b))
}

// unrepresentable is the error for a valid value the ClickHouse type can't
// hold.
func unrepresentable(chType string, b []byte) error {
	return fmt.Errorf("%s can't hold %s: %w", chType, quoteValue(b), ErrUnrepresentable)
}
