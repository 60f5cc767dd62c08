-- Schema version 16 is another change's (the second factor, issue 39):
-- this placeholder keeps the numbering without gaps until it lands, and
-- goes when it does.
SELECT 1;
