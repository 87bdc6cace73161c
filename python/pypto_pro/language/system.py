"""pl.system: synchronisation between pipes and cores (docs/language.md#synchronisation)."""

from pypto_pro.language.builtins import system_level

globals().update(system_level())
__all__ = sorted(system_level())
