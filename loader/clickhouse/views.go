package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// shadowTable reports whether name is one of ferry's working tables (a
// rebuild's shadow, a swap's old table), which get no current-state view.
func shadowTable(name string) bool { return strings.Contains(name, "__ferry_") }

// syncView makes the current-state view of tm (Config.CurrentViews) show
// the table's columns as the mapping has them now; it does nothing when
// views are off. It refuses to replace a table that is not a view, such as
// a replicated table that happens to have the view's name.
func (s *Sink) syncView(ctx context.Context, tm *schema.TableMap) error {
	if !s.views || shadowTable(tm.Name) {
		return nil
	}
	view := schema.CurrentViewName(tm.Name)
	engine, err := s.tableEngine(ctx, view)
	if err != nil {
		return err
	}
	if engine != "" && engine != "View" {
		return reject(fmt.Errorf("clickhouse: cannot create the current-state view of %s: %s exists and is a %s table, not a view; "+
			"rename it or turn --current-views off", s.table(tm.Name), s.table(view), engine))
	}
	if !s.caps.ReplaceView && engine != "" {
		// A reader may find the view missing between the two statements.
		if err := s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(view), "drop view "+s.table(view)); err != nil {
			return err
		}
	}
	q := tm.CurrentViewSQL(s.db, s.caps.ReplaceView)
	if err := s.exec(ctx, q, "create view "+s.table(view)); err != nil {
		return reject(err)
	}
	s.log.Debug("current-state view made", zap.String("view", view), zap.String("table", tm.Name))
	return nil
}

// dropView drops the current-state view of the table named name, if any.
func (s *Sink) dropView(ctx context.Context, name string) error {
	if !s.views || shadowTable(name) {
		return nil
	}
	view := schema.CurrentViewName(name)
	engine, err := s.tableEngine(ctx, view)
	if err != nil || engine != "View" {
		return err
	}
	return s.exec(ctx, "DROP TABLE IF EXISTS "+s.table(view), "drop view "+s.table(view))
}

// CurrentView is the name of the current-state view of the table named
// name when there is one (made by an earlier run with CurrentViews),
// whether or not this sink makes views; "" when there is none.
func (s *Sink) CurrentView(ctx context.Context, name string) (string, error) {
	view := schema.CurrentViewName(name)
	engine, err := s.tableEngine(ctx, view)
	if err != nil || engine != "View" {
		return "", err
	}
	return view, nil
}
