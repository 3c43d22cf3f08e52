"""The scenario files, shipped with edgefl as the data package ``edgefl.scenarios``
(``edgefl.shipped`` lists and finds them; pyproject.toml maps this folder)."""
