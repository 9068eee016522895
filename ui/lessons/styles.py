"""The Lessons page's CSS: a screen without the sidebar, and projector-size text for presenter mode."""

# a student's laptop and the projector show the lesson alone
NO_SIDEBAR_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stSidebarNav"] { display: none !important; }
</style>
"""
# read from the back of a lecture hall: the page's whole width, every text larger
PRESENTER_CSS = """
<style>
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 1.5rem 2.5rem 1rem 2.5rem; }
[data-testid="stMain"] h1 { font-size: 3.2rem !important; }
[data-testid="stMain"] h4 { font-size: 1.9rem !important; }
[data-testid="stMain"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMain"] [data-testid="stMarkdownContainer"] li { font-size: 1.55rem; line-height: 1.45; }
[data-testid="stMain"] [data-testid="stCaptionContainer"] p { font-size: 1.2rem; }
[data-testid="stMain"] [data-testid="stRadio"] label p { font-size: 1.5rem; }
[data-testid="stMain"] [data-testid="stCode"] code { font-size: 1.3rem; }
[data-testid="stMain"] button p { font-size: 1.3rem; }
</style>
"""
