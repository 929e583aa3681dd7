"""Physical layouts that let a sketch skip: clustered copies of a table (few large files of small
row groups, value-aligned blocks) and the prediction of how much of a table a sketch's filter
still reads, from file footers and page indexes.  Imports ``partition`` and below.
"""
