package schema

import (
	"reflect"
	"testing"

	"github.com/shopspring/decimal"
)

// TestWireBuilderValues checks what the copy's decimal builder gives back
// beyond Canonical's text: the exponent of Convert's value (a Kafka event
// writes "0.00" for numeric(10,2)'s zero), Zero for AppendZero and for a
// NULL in a NullAsDefault column, and the integers a sink sends.
func TestWireBuilderValues(t *testing.T) {
	tm, err := Map(Table{Schema: "s", Name: "t", NullAsDefault: true, Columns: []Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true, NotNull: true},
		{Name: "n", TypeOID: 1700, TypeMod: numericMod(10, 2)},
	}}, Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	cm := tm.Columns[1]
	b := cm.NewBuilder()
	wb, ok := b.(WireInts)
	if !ok {
		t.Fatalf("builder of %s is %T, not WireInts", cm.Type, b)
	}
	texts := []string{"0.00", "1.50", "-3.10", "12345678.90"}
	for _, text := range texts {
		if err := b.Append([]byte(text), false); err != nil {
			t.Fatal(err)
		}
	}
	b.AppendZero()
	if err := b.Append(nil, true); err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		want, err := cm.Convert([]byte(text), false)
		if err != nil {
			t.Fatal(err)
		}
		got := b.Value(i).(decimal.Decimal)
		if got.Exponent() != want.(decimal.Decimal).Exponent() || got.StringFixed(-got.Exponent()) != text {
			t.Errorf("value %d: %s (exponent %d), Convert's %s (exponent %d)", i,
				got.StringFixed(-got.Exponent()), got.Exponent(), text, want.(decimal.Decimal).Exponent())
		}
	}
	zero, err := cm.Convert(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 6; i++ {
		if !reflect.DeepEqual(b.Value(i), cm.Zero()) || !reflect.DeepEqual(b.Value(i), zero) {
			t.Errorf("value %d: %#v, want Zero %#v", i, b.Value(i), cm.Zero())
		}
	}
	vals, nulls := wb.WireInts()
	if want := []int64{0, 150, -310, 1234567890, 0, 0}; !reflect.DeepEqual(vals, want) || nulls != nil {
		t.Errorf("WireInts = %v, %v; want %v, nil", vals, nulls, want)
	}
	typed, _ := b.Typed()
	for i, d := range typed.([]decimal.Decimal) {
		if !reflect.DeepEqual(d, b.Value(i)) {
			t.Errorf("Typed()[%d] = %#v, Value %#v", i, d, b.Value(i))
		}
	}
	b.Truncate(2)
	b.AppendZero()
	if b.Len() != 3 || !reflect.DeepEqual(b.Value(2), cm.Zero()) || b.Value(1).(decimal.Decimal).String() != "1.5" {
		t.Errorf("after Truncate(2) and AppendZero: %d values, %v %v", b.Len(), b.Value(1), b.Value(2))
	}
}
