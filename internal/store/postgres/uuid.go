package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidCodec is pgx's codec for the uuid type that also encodes a uuid.UUID, the type of
// every id the store passes, as its 16 bytes. pgx's own codec does not know the type and
// goes through its driver.Valuer: the id as a string, which the binary codec refuses (an
// error made and thrown away), then parsed back to bytes. That was an eighth of the
// coordinator's CPU on PostgreSQL under throughput-64.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return encodeUUIDBinary{}
		case pgtype.TextFormatCode:
			return encodeUUIDText{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

type encodeUUIDText struct{}

func (encodeUUIDText) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(uuid.UUID).String()...), nil
}

// registerUUID gives a new connection's type map uuidCodec for the uuid type.
func registerUUID(_ context.Context, conn *pgx.Conn) error {
	conn.TypeMap().RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	return nil
}
