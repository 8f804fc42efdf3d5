package clickhouse

import (
	"context"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/schema"
)

// isJSON reports a column of ClickHouse's JSON type (schema.Table.NativeJSON).
func isJSON(c schema.ColumnMap) bool {
	return c.Type == "JSON" || c.Type == "Nullable(JSON)"
}

// hasJSON reports whether the table has a JSON column.
func hasJSON(tm *schema.TableMap) bool {
	for _, c := range tm.Columns {
		if isJSON(c) {
			return true
		}
	}
	return false
}

// jsonInsertSettings are the settings of an INSERT into a table with a JSON
// column. The server infers each path's type from the text ferry sends, and
// by default takes strings that look like dates for Date or DateTime, which
// rewrites them: "2024-1-1" came back as "2024-01-01" on 26.7. With these
// off every string stays the string it was; schema.CheckJSON refuses the
// values the type alters in other ways.
var jsonInsertSettings = ch.Settings{
	"input_format_try_infer_dates":     0,
	"input_format_try_infer_datetimes": 0,
}

// jsonInsertContext is ctx with jsonInsertSettings when the table has a
// JSON column.
func jsonInsertContext(ctx context.Context, tm *schema.TableMap) context.Context {
	if !hasJSON(tm) {
		return ctx
	}
	return ch.Context(ctx, ch.WithSettings(jsonInsertSettings))
}

// readSelect is expr, a value of column c, as a query that reads values
// back should select it: DateTime64 as Int64 microseconds (rawTimeSelect),
// JSON as its text, which fromRead turns into a schema.JSON.
func readSelect(c schema.ColumnMap, expr string) string {
	if isJSON(c) {
		return "toJSONString(" + expr + ")"
	}
	return rawTimeSelect(c, expr)
}

// fromRead undoes readSelect on a value read back.
func fromRead(c schema.ColumnMap, v any) any {
	switch {
	case isRawTime(c):
		return fromMicros(v)
	case isJSON(c):
		if s, ok := v.(string); ok {
			return schema.JSON(s)
		}
	}
	return v
}

// carried is a value read back with readSelect, ready to be written again.
func carried(c schema.ColumnMap, v any) any {
	if j, ok := v.(schema.JSON); ok && isJSON(c) {
		return schema.JSON(schema.RespellJSON(string(j)))
	}
	return v
}

// externalType is the type of column c in insertExternal's external table:
// JSON travels as its text, which the INSERT ... SELECT converts.
func externalType(c schema.ColumnMap, typ string) string {
	if isJSON(c) {
		return strings.Replace(typ, "JSON", "String", 1)
	}
	return typ
}
