"""Python >= 3.10 import shim for riak==2.7.0 (riak-python-client, 2016).

Put the directory holding this file on PYTHONPATH so the interpreter imports
it at start-up (site.py imports `sitecustomize` automatically):

    PYTHONPATH=tests/clients python -m unittest discover ...

It restores exactly what `import riak, riak.tests` needs on Python 3.11:

1. collections ABC aliases removed in Python 3.10:
     Iterable  - riak/mapreduce.py:22, riak/datatypes/set.py:105
     Mapping   - riak/util.py:7, riak/datatypes/map.py:19
     Sized     - riak/datatypes/register.py:19
     Set       - riak/datatypes/set.py:10 (class Set(collections.Set, ...))
     Sequence  - riak/client/index_page.py:19
2. namedtuple(verbose=...) removed in Python 3.7: riak/codecs/__init__.py:19

Not needed on 3.11 but needed on newer Pythons (not handled here):
  distutils (riak/transports/feature_detect.py:1, removed in 3.12; the venv's
  setuptools `_distutils_hack` may still provide it), cgi.parse_header
  (riak/codecs/http.py:5, riak/transports/http/stream.py:4, removed in 3.13).
"""
import collections
import collections.abc

for _name in ('Iterable', 'Mapping', 'Sized', 'Set', 'Sequence'):
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))

if not getattr(collections.namedtuple, '_riak_shim', False):
    _orig_namedtuple = collections.namedtuple

    def _namedtuple(*args, **kwargs):
        kwargs.pop('verbose', None)
        return _orig_namedtuple(*args, **kwargs)

    _namedtuple._riak_shim = True
    collections.namedtuple = _namedtuple
