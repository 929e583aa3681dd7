"""Numeric facts every layer relies on, defined once.

``EXACT_INT`` is 2**53: every integer of smaller magnitude is an exact double.  Decimals are
converted to doubles exactly below it, hash keys are taken modulo it so that ``key / EXACT_INT``
is an exact double in [0, 1), and generated integer columns are typed as integers only below it.

>>> float(EXACT_INT - 1) == EXACT_INT - 1, float(EXACT_INT + 1) == EXACT_INT + 1
(True, False)
"""

EXACT_INT = 2 ** 53
