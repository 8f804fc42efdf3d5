package schema

import "testing"

func TestCurrentViewSQL(t *testing.T) {
	keyed, err := Map(Table{Schema: "public", Name: "or`ders", Columns: []Column{
		{Name: "id", TypeOID: 23, Key: true}, {Name: "we ird", TypeOID: 25}}}, CapabilitiesFor(18, 16))
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE VIEW `d`.`or\\`ders_current` AS SELECT `id`, `we ird` FROM `d`.`or\\`ders` FINAL WHERE `_ferry_deleted` = 0"
	if got := keyed.CurrentViewSQL("d", false); got != want {
		t.Errorf("keyed:\n got  %s\n want %s", got, want)
	}
	appendOnly, err := Map(appendOnlyTable(), CapabilitiesFor(26, 7))
	if err != nil {
		t.Fatal(err)
	}
	got := appendOnly.CurrentViewSQL("d", true)
	want = "CREATE OR REPLACE VIEW `d`.`" + appendOnly.Name + "_current` AS SELECT "
	for i, c := range appendOnly.Columns {
		if i > 0 {
			want += ", "
		}
		want += QuoteCH(c.Name)
	}
	want += " FROM `d`.`" + appendOnly.Name + "`"
	if got != want {
		t.Errorf("append-only:\n got  %s\n want %s", got, want)
	}
}
