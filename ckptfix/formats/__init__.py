"""Pure byte <-> model converters, one module per on-disk format. No IO, no ckptfix imports
except :mod:`ckptfix.errors`."""
